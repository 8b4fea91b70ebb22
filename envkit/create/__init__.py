"""Making an environment: prepare, install (atomic), lock (the one conda-lock adapter)."""
