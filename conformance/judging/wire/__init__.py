"""The wire: requests sent and what came back, parsed from bytes or traffic."""
