// The playground's script: runs the code cell through the public API (fetch with the key as a
// Bearer token, events read from the streamed response as SSE) and renders each event as it comes;
// the terminal pane (terminal.js) opens a shell in the same session.
/* global document, fetch, sessionStorage, TextDecoder, AbortController, performance */
import { TerminalPane } from '/playground/terminal.js'

const $ = (id) => document.getElementById(id)
const keyInput = $('key')
const codeInput = $('code')
const runButton = $('run')
const interruptButton = $('interrupt')
const statusEl = $('status')
const sessionEl = $('session')
const sessionStateEl = $('session-state')
const hibernateButton = $('hibernate')
const output = $('output')

let sessionId = null
let running = false

keyInput.value = sessionStorage.getItem('replcast-key') ?? ''
keyInput.addEventListener('change', () => sessionStorage.setItem('replcast-key', keyInput.value.trim()))

/** An API error: the problem+json `code` (or `network`) and its detail. */
class ApiError extends Error {
  constructor(status, code, detail) {
    super(`${code}: ${detail}`)
    this.status = status
    this.code = code
  }
}

async function api(method, path, { body, accept = 'application/json', signal, headers = {} } = {}) {
  let res
  try {
    res = await fetch(path, {
      method,
      signal,
      headers: {
        authorization: `Bearer ${keyInput.value.trim()}`,
        accept,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  } catch (err) {
    if (err.name === 'AbortError') throw err
    throw new ApiError(0, 'network', 'the server cannot be reached')
  }
  if (res.ok) return res
  const problem = await res.json().catch(() => ({}))
  throw new ApiError(res.status, problem.code ?? `http_${res.status}`, problem.detail ?? res.statusText)
}

function setStatus(state, text = state) {
  statusEl.dataset.state = state
  statusEl.textContent = text
}

function setSession(id, status = 'ready') {
  sessionId = id
  sessionEl.textContent = id ? `session ${id}` : 'no session yet'
  setSessionState(id ? status : 'none')
}

/** The session's state as the page last saw it: ready, hibernating, hibernated or waking (none: no session). */
function setSessionState(state, text = state) {
  sessionStateEl.dataset.state = state
  sessionStateEl.textContent = text
  sessionStateEl.hidden = state === 'none'
  hibernateButton.disabled = state !== 'ready' || running
}

// ---- rendering -------------------------------------------------------------------------------

const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g // eslint-disable-line no-control-regex

function append(tag, className, text) {
  const el = document.createElement(tag)
  el.className = className
  if (text !== undefined) el.textContent = text
  output.append(el)
  return el
}

/** stdout/stderr: consecutive chunks of one stream grow one block, so lines split across chunks stay whole. */
function appendStream(name, text) {
  const last = output.lastElementChild
  if (last && last.classList.contains(name)) last.textContent += text
  else append('pre', name, text)
}

/** A MIME bundle, richest first: images, HTML (scripts cannot run under the page's CSP), then text. */
function appendBundle(kind, data) {
  for (const type of ['image/png', 'image/jpeg', 'image/gif', 'image/webp']) {
    if (typeof data[type] === 'string') {
      const img = append('img', kind)
      img.alt = `${kind} (${type})`
      img.src = `data:${type};base64,${data[type]}`
      return
    }
  }
  if (typeof data['image/svg+xml'] === 'string') {
    const img = append('img', kind)
    img.alt = `${kind} (image/svg+xml)`
    img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(data['image/svg+xml'])}`
    return
  }
  if (typeof data['text/html'] === 'string') {
    append('div', `${kind} html`).innerHTML = data['text/html']
    return
  }
  if (typeof data['text/plain'] === 'string') append('pre', kind, data['text/plain'])
}

function render(e) {
  switch (e.type) {
    case 'stdout':
    case 'stderr':
      appendStream(e.type, e.text ?? '')
      break
    case 'result':
    case 'display':
      appendBundle(e.type, e.data ?? {})
      break
    case 'error': {
      const tb = (e.traceback ?? []).join('').replace(ANSI, '')
      append('pre', 'error', tb || `${e.ename}: ${e.evalue}`)
      break
    }
    case 'limit':
      append('div', 'note', `output limit reached: ${e.dropped_bytes} bytes of ${e.what} dropped`)
      break
    case 'status':
      if (e.state === 'queued') setStatus('queued', 'queued behind another run')
      else if (e.state === 'running') setStatus('running')
      break
  }
}

// ---- running ---------------------------------------------------------------------------------

/** Reads an SSE response body, calling onEvent for each event; returns the last event id seen. */
async function readEvents(res, onEvent, lastId) {
  const reader = res.body.getReader()
  const decoder = new TextDecoder()
  let buf = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return lastId
    buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n')
    let cut
    while ((cut = buf.indexOf('\n\n')) !== -1) {
      const block = buf.slice(0, cut)
      buf = buf.slice(cut + 2)
      let id = ''
      const data = []
      for (const line of block.split('\n')) {
        const colon = line.indexOf(':')
        const field = colon === -1 ? line : line.slice(0, colon)
        const val = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'id') id = val
        else if (field === 'data') data.push(val)
      }
      if (id) lastId = id
      if (data.length) onEvent(JSON.parse(data.join('\n')))
    }
  }
}

async function ensureSession() {
  if (sessionId) return sessionId
  setStatus('starting', 'starting a session')
  const res = await api('POST', '/v1/sessions', { body: {} })
  setSession((await res.json()).id)
  return sessionId
}

/** Starts the execution, re-creating the session once if it is gone (reaped while idle, or dead). */
async function startExecution(code, signal) {
  const start = async () => api('POST', `/v1/sessions/${await ensureSession()}/executions`, { body: { code }, accept: 'text/event-stream', signal })
  try {
    return await start()
  } catch (err) {
    if (!(err instanceof ApiError) || (err.code !== 'session_not_found' && err.code !== 'session_dead')) throw err
    append('div', 'note', `session ${sessionId} is gone (${err.code}); running in a new one`)
    setSession(null)
    return start()
  }
}

async function run() {
  if (running) return
  running = true
  runButton.disabled = true
  hibernateButton.disabled = true
  output.replaceChildren()
  const t0 = performance.now()
  const ac = new AbortController()
  let final = null
  const onEvent = (e) => {
    if (e.type === 'done') final = e.status
    else render(e)
  }
  // A hibernated session is woken by the run itself (the server restores it before the code starts).
  const waking = sessionStateEl.dataset.state === 'hibernated' ? sessionId : null
  if (waking) {
    setSessionState('waking', 'waking')
    setStatus('waking', 'waking the session')
  }
  try {
    const res = await startExecution(codeInput.value, ac.signal)
    // Unless the wake failed and the run went to a new session (startExecution says so in a note).
    if (waking && waking === sessionId) {
      const secs = ((performance.now() - t0) / 1000).toFixed(1)
      setSessionState('ready', `woken in ${secs} s`)
      append('div', 'note', `session woken from hibernation in ${secs} s, its state as it was`)
    }
    const location = res.headers.get('location')
    interruptButton.disabled = false
    setStatus('running')
    let lastId = await readEvents(res, onEvent, '')
    // A dropped connection: resume after the last event seen (nothing lost, nothing repeated).
    for (let retry = 0; final === null && location && retry < 5; retry++) {
      const headers = lastId ? { 'last-event-id': lastId } : {}
      const again = await api('GET', `${location}/events`, { accept: 'text/event-stream', signal: ac.signal, headers })
      if (again.status === 204) break
      lastId = await readEvents(again, onEvent, lastId)
    }
    const secs = ((performance.now() - t0) / 1000).toFixed(1)
    setStatus(final ?? 'failed', final ? `${final} · ${secs} s` : 'failed: the event stream ended early')
  } catch (err) {
    append('pre', 'error', err.message)
    setStatus('failed', err.code ? `failed: ${err.code}` : 'failed')
    if (waking && sessionId) void refreshSession()
  } finally {
    running = false
    runButton.disabled = false
    interruptButton.disabled = true
    if (sessionId) setSessionState(sessionStateEl.dataset.state, sessionStateEl.textContent)
  }
}

/** A Session as the API answers it: its status, and since when it is hibernated. */
function showSession(s) {
  const at = s.hibernated_at ? ` ${new Date(s.hibernated_at).toLocaleTimeString()}` : ''
  setSessionState(s.status, s.status === 'hibernated' ? `hibernated${at}` : s.status)
}

/**
 * Reads the session again and shows its state: after a failed wake (dead), or when the page is looked
 * at again (the server may have hibernated it at its idle deadline, or deleted it).
 */
async function refreshSession() {
  const id = sessionId
  try {
    const s = await (await api('GET', `/v1/sessions/${id}`)).json()
    if (id === sessionId && !running) showSession(s)
  } catch (err) {
    if (id !== sessionId) return
    append('div', 'note', `session ${id}: ${err.message}`)
    if (err.code === 'session_not_found') setSession(null)
  }
}

/** Checkpoints the session to disk (its sandbox freed); the next run wakes it with its state. */
async function hibernate() {
  if (!sessionId || running) return
  terminal.close() // its shell is checkpointed with the rest; the connection would end anyway
  setSessionState('hibernating', 'hibernating')
  runButton.disabled = true
  try {
    showSession(await (await api('POST', `/v1/sessions/${sessionId}/hibernate`)).json())
  } catch (err) {
    append('div', 'note', `hibernate: ${err.message}`)
    setSessionState('ready')
  } finally {
    runButton.disabled = false
  }
}

async function interrupt() {
  if (!sessionId) return
  try {
    await api('POST', `/v1/sessions/${sessionId}/interrupt`)
  } catch (err) {
    append('div', 'note', `interrupt: ${err.message}`)
  }
}

// ---- the terminal pane ---------------------------------------------------------------------------

const terminalStatus = $('terminal-status')
const closeTerminalButton = $('close-terminal')
const terminal = new TerminalPane({
  el: $('terminal'),
  status: (text) => {
    terminalStatus.textContent = text
    terminalStatus.dataset.state = text.startsWith('open') ? 'ok' : text.startsWith('closed:') ? 'error' : 'idle'
    closeTerminalButton.disabled = !terminal.open
  },
  session: ensureSession,
  api,
})
$('open-terminal').addEventListener('click', () => {
  terminal.connect().catch((err) => {
    terminalStatus.textContent = `failed: ${err.code ?? err.message}`
    terminalStatus.dataset.state = 'error'
  })
})
closeTerminalButton.addEventListener('click', () => terminal.close())

runButton.addEventListener('click', () => void run())
interruptButton.addEventListener('click', () => void interrupt())
hibernateButton.addEventListener('click', () => void hibernate())
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && sessionId && !running) void refreshSession()
})
$('new-session').addEventListener('click', () => {
  terminal.close()
  if (sessionId) void api('DELETE', `/v1/sessions/${sessionId}`).catch(() => undefined)
  setSession(null)
})
codeInput.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    e.preventDefault()
    void run()
  } else if (e.key === 'Tab' && !e.shiftKey) {
    e.preventDefault()
    codeInput.setRangeText('    ', codeInput.selectionStart, codeInput.selectionEnd, 'end')
  }
})
