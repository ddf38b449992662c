/** Anything with `teardown` (a tap `Test`), so helpers need not depend on tap's types. */
export interface Teardown {
  teardown: (fn: () => unknown) => void
}
