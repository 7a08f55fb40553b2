"""Signing in to the console over plain HTTP, as a browser would, for tests."""

from __future__ import annotations

import html
import re

import httpx

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(page: str) -> str:
    """The first CSRF token a console page carries."""
    found = CSRF.search(page)
    assert found, "the page carries no CSRF token"
    return found.group(1)


def sign_in(client: httpx.Client, key: str) -> httpx.Response:
    """Open the sign-in page and post ``key``; the answer (303 and a session cookie when it worked)."""
    form = client.get("/console/login")
    assert form.status_code == 200, form.text
    return client.post("/console/login", data={"api_key": key, "next": "/console/", "csrf_token": csrf_of(form.text)})


def text_of(page: str) -> str:
    """The page's words, without tags and with spaces collapsed (what a person reads)."""
    words = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    return re.sub(r" ([:;,.)])", r"\1", words)
