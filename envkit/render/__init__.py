"""Output for people and programs: console (rich), JSON, JUnit, HTML, fleet views, Prometheus /
OpenMetrics metrics (metrics, exposition), NFD node labels (nfd), node-problem-detector's message (npd).

The only package that imports rich; this file imports nothing, so a --json run never loads rich."""
