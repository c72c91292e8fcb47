-- Run by test/lsp/nvim_test.py inside `nvim --headless --clean`: Neovim's
-- own LSP client (0.7 API: start_client + buf_attach_client, as Debian 12
-- ships it) starts `fabricize lsp`, waits for its diagnostics, applies one
-- quick fix, undoes it, then applies the "Migrate this file to Fabric" action, through
-- vim.lsp.util.apply_workspace_edit (the editor's own edit code, UTF-16
-- positions), and writes what the buffer holds after each step.
local env = vim.env
local function fail(message)
  io.stderr:write("NVIM CLIENT FAILED: " .. message .. "\n")
  vim.cmd("cquit! 1")
end
local function save(path, buf)
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local out = assert(io.open(path, "w"))
  out:write(table.concat(lines, "\n") .. "\n")
  out:close()
end

vim.cmd("edit " .. vim.fn.fnameescape(env.FABRIC_NVIM_FILE))
local buf = vim.api.nvim_get_current_buf()
local client_id = vim.lsp.start_client({
  name = "fabricize",
  cmd = { env.FABRIC_NVIM_FABRICIZE, "lsp" },
  root_dir = vim.fn.fnamemodify(env.FABRIC_NVIM_FILE, ":h"),
})
if not client_id then fail("the client did not start") end
vim.lsp.buf_attach_client(buf, client_id)
local client = vim.lsp.get_client_by_id(client_id)

if not vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 50) then
  fail("no diagnostics within 60 s")
end
local report = assert(io.open(env.FABRIC_NVIM_OUT .. ".diagnostics", "w"))
for _, d in ipairs(vim.diagnostic.get(buf)) do
  report:write(string.format("%d:%d %s %s\n", d.lnum + 1, d.col + 1, tostring(d.code or d.user_data and d.user_data.lsp and d.user_data.lsp.code), d.source or ""))
end
report:close()

local function actions(first_line, last_line, only)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = first_line, character = 0 }, ["end"] = { line = last_line, character = 0 } },
    context = { diagnostics = {}, only = only },
  }
  local response = client.request_sync("textDocument/codeAction", params, 60000, buf)
  if not response or response.err then fail("codeAction failed: " .. vim.inspect(response)) end
  return response.result or {}
end

-- One quick fix: the backward on the line FABRIC_NVIM_FIX_LINE (1-based).
local fix_line = tonumber(env.FABRIC_NVIM_FIX_LINE) - 1
local quick = nil
for _, a in ipairs(actions(fix_line, fix_line, { "quickfix" })) do
  if a.title:find("fabric%-backward", 1) then quick = a end
end
if not quick then fail("no fabric-backward quick fix on line " .. env.FABRIC_NVIM_FIX_LINE) end
vim.lsp.util.apply_workspace_edit(quick.edit, client.offset_encoding)
save(env.FABRIC_NVIM_OUT .. ".quickfix", buf)

-- Undone (a lone fabric.backward names a Fabric main does not have yet),
-- then the whole migration; the server sees each change as Neovim sends it.
vim.cmd("undo")
vim.wait(200)
local migrate = nil
for _, a in ipairs(actions(0, vim.api.nvim_buf_line_count(buf), { "source.fabricize.migrate" })) do
  if a.title == "Migrate this file to Fabric" then migrate = a end
end
if not migrate then fail("no \"Migrate this file to Fabric\" action") end
vim.lsp.util.apply_workspace_edit(migrate.edit, client.offset_encoding)
save(env.FABRIC_NVIM_OUT .. ".migrated", buf)
vim.cmd("qall!")
