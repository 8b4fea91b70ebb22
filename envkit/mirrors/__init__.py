"""The network side of package indexes: choosing and probing mirrors, the cache, HTTP."""
