-- Neovim's built-in LSP client against `toolrun lsp`, headless (tests/lsp_neovim.rs). Written
-- for Neovim 0.7 (Debian 12's), whose API later versions keep: start_client, buf_attach_client.
-- Reads TOOLRUN_BIN and SPEC, writes what it saw to OUT, one fact a line.
local out = {}
local function say(line) table.insert(out, line) end
local function finish()
  vim.fn.writefile(out, os.getenv("OUT"))
  vim.cmd("qa!")
end

vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("SPEC")))
local id = vim.lsp.start_client({
  name = "toolrun",
  cmd = { os.getenv("TOOLRUN_BIN"), "lsp" },
  root_dir = vim.fn.fnamemodify(os.getenv("SPEC"), ":h"),
})
vim.lsp.buf_attach_client(0, id)

if not vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50) then
  say("no diagnostics")
  return finish()
end
for _, d in ipairs(vim.diagnostic.get(0)) do
  local lsp = d.user_data and d.user_data.lsp or {}
  say(string.format("diagnostic %s %d:%d", d.code or lsp.code or "?", d.lnum, d.col))
end

-- Hover on the mistyped tool's declaration name (line 3, `get_weather:`).
local params = {
  textDocument = { uri = vim.uri_from_bufnr(0) },
  position = { line = 2, character = 4 },
}
local replies = vim.lsp.buf_request_sync(0, "textDocument/hover", params, 30000) or {}
for _, r in pairs(replies) do
  if r.result then
    say("hover " .. (r.result.contents.value or ""):gsub("\n.*", ""))
  end
end

-- The quick fix, applied by the client.
local diag = vim.diagnostic.get(0, { severity = vim.diagnostic.severity.ERROR })[1]
-- Neovim 0.7 keeps only part of the LSP diagnostic in user_data; this gives all of it.
local lsp_diag
for _, d in ipairs(vim.lsp.diagnostic.get_line_diagnostics(0, diag.lnum)) do
  if d.code == "E012" then lsp_diag = d end
end
local actions = vim.lsp.buf_request_sync(0, "textDocument/codeAction", {
  textDocument = { uri = vim.uri_from_bufnr(0) },
  range = lsp_diag.range,
  context = { diagnostics = { lsp_diag } },
}, 30000) or {}
for _, r in pairs(actions) do
  for _, action in ipairs(r.result or {}) do
    say("action " .. action.title)
    vim.lsp.util.apply_workspace_edit(action.edit, "utf-16")
  end
end
say("line " .. vim.api.nvim_buf_get_lines(0, 6, 7, false)[1])

-- After the edit the server reports no error.
local clean = vim.wait(60000, function()
  return #vim.diagnostic.get(0, { severity = vim.diagnostic.severity.ERROR }) == 0
end, 50)
say("clean " .. tostring(clean))

vim.lsp.stop_client(id)
local stopped = vim.wait(30000, function() return vim.lsp.get_client_by_id(id) == nil end, 50)
say("stopped " .. tostring(stopped))
finish()
