"""One module per verb: parse nothing, print nothing, return a record the face renders."""
