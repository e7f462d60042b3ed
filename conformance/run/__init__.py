"""The run layer: talking to a target and playing a run (client, SDK driver, pacing, resends, the engine)."""
