"""Pure rules shared by several commands (no I/O)."""
