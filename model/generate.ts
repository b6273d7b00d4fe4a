/**
 * Writes model/decide.pml from the table of src/core/decide.ts:
 *
 *   node --import tsx model/generate.ts
 */
import { writeFileSync } from "node:fs";
import { decidePml } from "./decide-pml.js";

writeFileSync(new URL("decide.pml", import.meta.url), decidePml());
