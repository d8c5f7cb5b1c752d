"""``python -m webgen_agent``: the same command line as the ``webgen-agent`` script."""

from webgen_agent.apps.cli.main import app

app(prog_name="webgen-agent")
