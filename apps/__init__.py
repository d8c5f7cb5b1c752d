"""Applications on top of the graph: command line, demo, rollouts, benchmark, report, scripted model server."""
