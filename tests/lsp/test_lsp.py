"""`toolrun lsp` driven by pytest-lsp, as an editor drives it: open, change, diagnostics, hover,
completion, definition, references, symbols, code action, shutdown. Run by tests/lsp.rs, which
passes the binary as TOOLRUN_BIN."""

import asyncio
import os
import pathlib

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

SPEC = """version: 1
secrets: [API_KEY]
tools:
  get_weather:
    kind: mock
    description: Weather of a city.
    input: { type: object, properties: { city: { type: string } } }
    responses:
      - result: { temp: 20 }
  fetch:
    kind: http
    description: Fetch a page of the example API.
    request:
      url: "https://api.example.com/x?key={{ secrets.API_KEY }}"
policy:
  allow: [get_wether, fetch]
models:
  bot:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: get_weather, arguments: { city: Paris } }]
          - answer: "\N{GRINNING FACE} done"
tests:
  - name: t
    query: q
    expect: { output_contains: "\N{GRINNING FACE}", status: complted }
"""

WAIT = 60  # seconds: only catches a hang


def at(text, needle, n=0, plus=0):
    """The LSP position of the n-th `needle`, `plus` UTF-16 units into it."""
    i = -1
    for _ in range(n + 1):
        i = text.index(needle, i + 1)
    line = text.count("\n", 0, i)
    col = text[text.rfind("\n", 0, i) + 1 : i]
    return types.Position(line=line, character=len(col.encode("utf-16-le")) // 2 + plus)


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[os.environ["TOOLRUN_BIN"], "lsp"]),
)
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("visual-studio-code"))
    )
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def spec(tmp_path: pathlib.Path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC, encoding="utf-8")
    return path


async def diagnostics(client: LanguageClient, uri: str, version: int):
    """The diagnostics published for `uri` at `version`."""

    async def wait():
        while True:
            params = await client.wait_for_notification("textDocument/publishDiagnostics")
            if params.uri == uri and params.version == version:
                return params.diagnostics

    return await asyncio.wait_for(wait(), WAIT)


def open_spec(client: LanguageClient, path: pathlib.Path, text: str = SPEC) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="yaml", version=1, text=text)
        )
    )
    return uri


def position(uri, pos):
    """The fields of a TextDocumentPositionParams, for any request that extends it."""
    return {"text_document": types.TextDocumentIdentifier(uri=uri), "position": pos}


@pytest.mark.asyncio
async def test_diagnostics_on_open_and_incremental_change(client: LanguageClient, spec):
    uri = open_spec(client, spec)
    found = await diagnostics(client, uri, 1)
    codes = sorted(str(d.code) for d in found)
    assert codes == ["E012", "E033", "W104"], found
    e012 = next(d for d in found if d.code == "E012")
    assert e012.severity == types.DiagnosticSeverity.Error
    assert e012.range.start == at(SPEC, "get_wether")
    assert e012.code_description.href.endswith("docs/codes.md#e012")
    # The emoji before `complted` is two UTF-16 units.
    e033 = next(d for d in found if d.code == "E033")
    assert e033.range.start == at(SPEC, "complted")
    # Incremental: fix the tool name.
    start = at(SPEC, "get_wether", plus=5)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=start,
                        end=types.Position(line=start.line, character=start.character + 5),
                    ),
                    text="eather",
                )
            ],
        )
    )
    found = await diagnostics(client, uri, 2)
    assert [d.code for d in found] == ["E033"], found


@pytest.mark.asyncio
async def test_hover_completion_definition_and_references(client: LanguageClient, spec):
    text = SPEC.replace("get_wether", "get_weather")
    uri = open_spec(client, spec, text)
    await diagnostics(client, uri, 1)

    hover = await client.text_document_hover_async(
        types.HoverParams(**(position(uri, at(text, "get_weather", 2, 2))))
    )
    assert "**tool** `get_weather`" in hover.contents.value
    assert "Weather of a city." in hover.contents.value

    completion = await client.text_document_completion_async(
        types.CompletionParams(**(position(uri, at(text, "fetch]"))))
    )
    items = completion.items if hasattr(completion, "items") else completion
    assert {"get_weather", "fetch"} <= {i.label for i in items}

    completion = await client.text_document_completion_async(
        types.CompletionParams(**(position(uri, at(text, "API_KEY }}"))))
    )
    items = completion.items if hasattr(completion, "items") else completion
    assert [i.label for i in items] == ["API_KEY"]

    found = await client.text_document_definition_async(
        types.DefinitionParams(**(position(uri, at(text, "get_weather", 1, 1))))
    )
    location = found[0] if isinstance(found, list) else found
    assert location.range.start == at(text, "get_weather")

    refs = await client.text_document_references_async(
        types.ReferenceParams(
            **(position(uri, at(text, "get_weather", 0, 1))),
            context=types.ReferenceContext(include_declaration=True),
        )
    )
    assert len(refs) == 3

    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [s.name for s in symbols] == ["tools", "models", "secrets", "tests"]


@pytest.mark.asyncio
async def test_quick_fix_for_did_you_mean(client: LanguageClient, spec):
    uri = open_spec(client, spec)
    found = await diagnostics(client, uri, 1)
    e012 = next(d for d in found if d.code == "E012")
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=e012.range,
            context=types.CodeActionContext(diagnostics=[e012]),
        )
    )
    assert len(actions) == 1
    fix = actions[0]
    assert fix.kind == types.CodeActionKind.QuickFix
    (edit,) = fix.edit.changes[uri]
    assert edit.new_text == "get_weather" and edit.range == e012.range
    # The server never wrote the file: the client applies edits.
    assert spec.read_text(encoding="utf-8") == SPEC


@pytest.mark.asyncio
async def test_bad_input_gets_empty_answers(client: LanguageClient, tmp_path):
    uri = open_spec(client, tmp_path / "broken.yaml", "version: 1\ntools: [\n  - : : {\n")
    found = await diagnostics(client, uri, 1)
    assert found and all(d.severity == types.DiagnosticSeverity.Error for d in found)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=500, character=3),
                        end=types.Position(line=900, character=0),
                    ),
                    text="x",
                )
            ],
        )
    )
    await diagnostics(client, uri, 2)
    hover = await client.text_document_hover_async(
        types.HoverParams(**(position("file:///not/open.yaml", types.Position(line=0, character=0))))
    )
    assert hover is None
