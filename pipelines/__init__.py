"""Jobs built on the connector: outreach, polling, sync, export, scheduling, and the CLI."""
