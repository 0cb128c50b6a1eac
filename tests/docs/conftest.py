"""What the README, the docs site and the examples show is what runs."""
