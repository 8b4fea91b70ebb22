"""Pure Plan + Template (+ chosen mirrors) -> spec files; and reading the specs people have."""
