"""Output for people and programs: console (rich), JSON, JUnit, HTML, fleet views.

The only package that imports rich; this file imports nothing, so a --json run never loads rich."""
