// Hostile code under runsc (gVisor), when the Docker engine has it registered: see test/helpers/hostile-suite.ts.
import t from 'tap'
import { hostileSuite } from './helpers/hostile-suite.js'
import { engineRuntimes } from './helpers/neighbour.js'

const hasRunsc = (await engineRuntimes()).has('runsc')
t.test('hostile code under runsc (gVisor)', { skip: hasRunsc ? false : 'the Docker engine has no runsc runtime' }, (t) => hostileSuite(t, 'runsc'))
