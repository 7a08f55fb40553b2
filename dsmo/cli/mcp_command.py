"""`dsmo mcp`: serve DSMO to assistants over MCP (stdio, or streamable HTTP with --http)."""

from __future__ import annotations

import click

from dsmo.cli.click_context import Context, pass_context, run


@click.command("mcp")
@click.option("--http", "over_http", is_flag=True, help="Serve streamable HTTP at /mcp instead of stdio.")
@click.option("--bind", help="With --http: host:port (default 127.0.0.1:8765).")
@pass_context
def mcp(obj: Context, over_http: bool, bind: str | None) -> None:
    """Serve DSMO's runs, tasks and decisions as MCP tools, authorised by the ingress's API keys.

    Over stdio the server acts for the key in DSMO_MCP_KEY; over HTTP each request sends its own
    (Authorization: Bearer <key>, or X-API-Key). Each tool needs the scope the ingress asks for
    the same act.

    \b
    Examples:
      DSMO_MCP_KEY=$(dsmo keys add assistant --scope read --scope start) dsmo mcp
      dsmo mcp --http --bind 127.0.0.1:8765
    """
    from dsmo.server.mcp_server import serve

    if bind is not None and not over_http:
        raise click.UsageError("--bind: give it with --http (stdio has no address)")
    run(lambda: serve(obj.settings, http=over_http, bind=bind))
