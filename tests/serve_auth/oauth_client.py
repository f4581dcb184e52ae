"""The official MCP Python SDK's OAuth clients against `toolrun serve --http` with `serve.auth`.

usage: oauth_client.py URL ISSUER client_credentials CLIENT SECRET SCOPE [TOOL...]
       oauth_client.py URL ISSUER authorization_code CLIENT SCOPE [TOOL...]
       oauth_client.py browse AUTHORIZATION_URL   (a `$BROWSER` for `toolrun auth login`)
The SDK finds the issuer through the server's 401 and protected-resource metadata, gets a token
(client credentials; or an authorization code with PKCE, whose login and consent pages at
oidc-provider this script fills in as a person would), lists the tools and calls each with `{}`,
then each TOOL named (one not listed: a 403 `insufficient_scope` makes the SDK ask for more).
Prints {"tools": [names], "calls": {name: text or error}}.
"""

import json
import re
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.exceptions import MCPError

REDIRECT = "http://127.0.0.1/callback"


class Memory:
    def __init__(self, client_info=None):
        self.tokens, self.client_info = None, client_info

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, info):
        self.client_info = info


async def log_in(authorization_url):
    """Follows the authorization request through oidc-provider's login form to the redirect."""
    async with httpx2.AsyncClient() as http:
        url = authorization_url
        for _ in range(10):
            resp = await http.get(url)
            if resp.status_code in (302, 303):
                url = urljoin(url, resp.headers["location"])
                if url.startswith(REDIRECT):
                    return url
                continue
            form = re.search(r'action="([^"]+)"', resp.text)
            uid = re.search(r'name="prompt" value="([^"]+)"', resp.text)
            data = {"prompt": uid.group(1) if uid else "login", "login": "alice", "password": "x"}
            resp = await http.post(urljoin(url, form.group(1)), data=data)
            url = urljoin(url, resp.headers["location"])
            if url.startswith(REDIRECT):
                return url
    raise RuntimeError("the authorization request never reached the redirect URI")


async def main():
    url, issuer, grant, *rest = sys.argv[1:]
    if grant == "client_credentials":
        client_id, secret, scope, *more = rest
        auth = ClientCredentialsOAuthProvider(url, Memory(), client_id, secret, scope=scope, issuer=issuer)
    else:
        client_id, scope, *more = rest
        landed = {}

        async def redirect(authorization_url):
            landed["url"] = await log_in(authorization_url)

        async def callback():
            q = parse_qs(urlparse(landed["url"]).query)
            if "code" not in q:
                raise RuntimeError(f"the authorization server answered {landed['url']}")
            return AuthorizationCodeResult(code=q["code"][0], state=q["state"][0], iss=q.get("iss", [None])[0])

        metadata = OAuthClientMetadata(redirect_uris=[REDIRECT], grant_types=["authorization_code", "refresh_token"],
                                       response_types=["code"], token_endpoint_auth_method="none", scope=scope)
        info = OAuthClientInformationFull(client_id=client_id, **metadata.model_dump(exclude_none=True))
        auth = OAuthClientProvider(url, metadata, Memory(info), redirect, callback)
    target = streamable_http_client(url, http_client=httpx2.AsyncClient(auth=auth))
    async with Client(target) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        calls = {}
        for name in tools + more:
            try:
                result = await client.call_tool(name, {})
                calls[name] = result.content[0].text
            except MCPError as e:
                calls[name] = {"error": e.message}
        print(json.dumps({"tools": tools, "calls": calls}))


async def browse(url):
    """As `$BROWSER URL` for `toolrun auth login`: logs in, then lands on toolrun's listener."""
    landed = await log_in(url)
    async with httpx2.AsyncClient() as http:
        await http.get(landed)


if sys.argv[1] == "browse":
    anyio.run(browse, sys.argv[2])
else:
    anyio.run(main)
