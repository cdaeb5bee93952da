// The background processes' face: what the session lifecycle (src/sessions/) uses of this room.
// ProcessRunner is the one owner of the state of the processes this instance drives; Processes is
// the way in for the routes and the MCP tools.
export { ProcessRunner } from './process-runner.js'
export { Processes } from './processes.js'
