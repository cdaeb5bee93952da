// A test's signal to code running in a session's sandbox: a file the code waits for, created from
// outside with `docker exec` (the code polls for it; the test knows exactly when it let the code go).
import Docker from 'dockerode'
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
