"""``python -m webgen_agent``: the same command line as the ``webgen-agent`` script."""

from webgen_agent.graph.cli import app

app(prog_name="webgen-agent")
