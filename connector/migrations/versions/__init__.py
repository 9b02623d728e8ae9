"""Migration scripts, written by hand to match ``connector.store``'s tables exactly."""
