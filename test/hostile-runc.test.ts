// Hostile code under runc (Docker's default runtime): see test/helpers/hostile-suite.ts.
import t from 'tap'
import { hostileSuite } from './helpers/hostile-suite.js'

t.test('hostile code under runc', (t) => hostileSuite(t, 'runc'))
