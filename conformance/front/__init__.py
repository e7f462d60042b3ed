"""The front doors: the pytest plugin, the command lines, the gate, the traffic judge's CLI and the proxy."""
