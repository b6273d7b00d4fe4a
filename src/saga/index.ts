/**
 * `idempotool/saga`: OP-5 for compensatable effects with no idempotency of their own (a refund, a wire, a
 * correction email). Record the intent, make the call, keep the external id; a retry gets the stored id
 * back and never calls again; a stale attempt is looked up downstream (`verify`) or left to the
 * reconciler (`idempotool/reconcile`), which can also compensate.
 * @module
 */
export { type Saga, type SagaOptions, type SagaStep, saga } from "./saga.js";
