"""`dsmo serve`, `dsmo keys` and `dsmo codec-server`: the HTTP faces of DSMO."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from dsmo.cli.click_context import Context, pass_context
from dsmo.server.api_keys import SCOPES, KeyStore


def register(cli: click.Group) -> None:
    for command in (serve, keys, codec_server):
        cli.add_command(command)


def _split(bind: str) -> tuple[str, int]:
    host, _, port = bind.rpartition(":")
    return host or "127.0.0.1", int(port)


@click.command()
@click.option("--bind", help="host:port (default: DSMO_INGRESS_BIND, 127.0.0.1:8080).")
@pass_context
def serve(obj: Context, bind: str | None) -> None:
    """Run the HTTP ingress for outside systems (OpenAPI at /docs and /openapi.json) and the console.

    The console for people (tasks, run pages, forms) is at / (sign in with an API key).

    \b
    Example:
      dsmo keys add crm --scope start --scope read --scope events:MESSAGE_RECEIVED
      dsmo serve --bind 127.0.0.1:8080
    """
    import uvicorn

    from dsmo.runtime.telemetry import setup_tracing
    from dsmo.server.ingress.app import create_app
    from dsmo.server.ingress.serving import server_config

    setup_tracing("dsmo-ingress")
    host, port = _split(bind or obj.settings.ingress.bind)
    uvicorn.Server(server_config(create_app(obj.settings), obj.settings, host, port, log_level="info")).run()


@click.group()
def keys() -> None:
    """API keys of the ingress (one per calling system, hashed at rest, scoped)."""


@keys.command("add")
@click.argument("name")
@click.option(
    "--scope", "scopes", multiple=True, required=True, type=click.Choice(SCOPES), help="Repeat for each scope."
)
@pass_context
def keys_add(obj: Context, name: str, scopes: tuple[str, ...]) -> None:
    """Create (or replace) the key of NAME; prints it once."""
    key = KeyStore(obj.settings.api_keys_path).add(name, list(scopes))
    click.echo(key)
    click.echo(f"# stored as a hash in {obj.settings.api_keys_path}; this is the only time it is shown", err=True)


@keys.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def keys_list(obj: Context, as_json: bool) -> None:
    found = KeyStore(obj.settings.api_keys_path).load()
    if as_json:
        click.echo(json.dumps([{k: v for k, v in asdict(key).items() if k != "key_hash"} for key in found]))
        return
    for key in found:
        click.echo(f"{key.name:<20} {key.prefix}…  {' '.join(key.scopes)}")


@keys.command("revoke")
@click.argument("name")
@pass_context
def keys_revoke(obj: Context, name: str) -> None:
    if not KeyStore(obj.settings.api_keys_path).revoke(name):
        raise click.UsageError(f"no key named {name!r}")
    click.echo(f"revoked {name}")


@click.command("codec-server")
@click.option("--bind", default="127.0.0.1:8081", show_default=True, help="host:port")
@click.option(
    "--origin",
    "origins",
    multiple=True,
    default=("http://localhost:8233", "http://127.0.0.1:8233"),
    show_default=True,
    help="Web UI origins allowed by CORS.",
)
@click.option(
    "--token", envvar="DSMO_CODEC_SERVER_TOKEN", help="Require this bearer token (env DSMO_CODEC_SERVER_TOKEN)."
)
@click.option(
    "--insecure-no-token",
    is_flag=True,
    help="Serve without a token: anyone who reaches the port can decrypt and encrypt payloads.",
)
@pass_context
def codec_server(obj: Context, bind: str, origins: tuple[str, ...], token: str | None, insecure_no_token: bool) -> None:
    """Decode payloads for the Web UI and `temporal workflow show --codec-endpoint`."""
    import uvicorn

    from dsmo.client.codec import keys_from_env
    from dsmo.server.codec_server import create_codec_app
    from dsmo.server.ingress.serving import server_config

    if not token and not insecure_no_token:
        raise click.UsageError(
            "--token (or DSMO_CODEC_SERVER_TOKEN) is required: the codec server decrypts for whoever asks; "
            "pass --insecure-no-token to serve without one"
        )
    host, port = _split(bind)
    app = create_codec_app(keys_from_env(obj.settings.codec.to_env()), list(origins), token)
    uvicorn.Server(server_config(app, obj.settings, host, port)).run()
