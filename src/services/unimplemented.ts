import { ServiceError } from "../errors.js";

/** A handler for an RPC that a later release implements: always UNIMPLEMENTED. */
export async function notYetImplemented(): Promise<never> {
  throw new ServiceError("UNIMPLEMENTED", "this RPC is not implemented yet");
}
