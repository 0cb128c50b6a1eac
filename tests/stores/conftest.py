"""Every store backend against real SQLite files, Redis and PostgreSQL, including outages and recovery."""
