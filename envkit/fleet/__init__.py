"""Many reports: the fleet view, the two-report diff, fingerprints."""
