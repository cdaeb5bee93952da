// A test's signal to code running in a session's sandbox: a file the code waits for, created from
// outside with `docker exec` (the code polls for it; the test knows exactly when it let the code go).
import Docker from 'dockerode'
import { DockerDemuxer } from '../../src/sandbox/demux.js'
import { LABEL } from '../../src/sandbox/labels.js'

/** The session's container, as the test's own Docker client sees it. */
export async function containerOf(sid: string): Promise<Docker.Container> {
  const [info] = await new Docker().listContainers({ filters: { label: [`${LABEL.session}=${sid}`] } })
  return new Docker().getContainer(info!.Id)
}

/** Creates `path` inside the session's sandbox; resolves once `touch` has exited. */
export async function touch(sid: string, path: string): Promise<void> {
  const exec = await (await containerOf(sid)).exec({ Cmd: ['touch', path], AttachStdout: true, AttachStderr: true })
  const out = await exec.start({ hijack: true, stdin: false })
  await new Promise((resolve) => {
    out.on('end', resolve)
    out.on('close', resolve)
    out.resume()
  })
}

/** Whether the REPL in the session's sandbox has written execution `eid`'s `done` (its container log's last lines). */
export async function doneInContainerLog(sid: string, eid: string): Promise<boolean> {
  const raw = await (await containerOf(sid)).logs({ stdout: true, stderr: false, tail: 3 })
  const parts: Buffer[] = []
  new DockerDemuxer(
    (b) => parts.push(Buffer.from(b)),
    () => undefined,
  ).push(raw)
  return Buffer.concat(parts).toString('utf8').includes(`"type":"done","exec_id":"${eid}"`)
}
