/**
 * Who may make a call, in which namespace, with what request: the checks every call passes before its
 * handler runs, the same for unary calls and server streams.
 */
import { fromBinary, type DescMethod } from "@bufbuild/protobuf";
import { status as GrpcStatus, type Metadata, type StatusObject } from "@grpc/grpc-js";
import { mayUseNamespace, type Principal } from "../domain/principal.js";
import { defaultNamespace, isValidNamespace } from "../domain/session-key.js";

/** What a call without a token is told: how to send one, and where the sessionstate commands and clients take it from. */
export const missingTokenDetails =
  "missing bearer token: send the metadata authorization: Bearer <token> (the sessionstate commands read it from SESSIONSTATE_TOKEN or --token-file; the clients take a token option)";

/** A status a call is answered or ended with. */
export type Status = Pick<StatusObject, "code" | "details">;

export const shuttingDown: Status = { code: GrpcStatus.UNAVAILABLE, details: "server is shutting down; retry later" };
export const notServing: Status = { code: GrpcStatus.UNAVAILABLE, details: "database unavailable; retry later" };

/** The request metadata that names a call's namespace (SPEC §12.1). */
export const namespaceHeader = "sessionstate-namespace";

/** Resolves a bearer token to its principal (`undefined`: unknown). */
export type Authenticate = (token: string) => Principal | undefined;

/**
 * How a method is scoped: `public` (health: no credentials, in no namespace), `namespace` (every call is
 * in the namespace its header names, checked against the caller's), or `every-namespace` (the caller's
 * credentials decide what it sees across namespaces; the header is ignored: ListNamespaces).
 */
export type MethodScope = "public" | "namespace" | "every-namespace";

/** A call that passed: its caller (undefined when authentication is off or the service is public), namespace and request. */
export interface AdmittedCall {
  principal: Principal | undefined;
  namespace: string;
  request: unknown;
}

/**
 * The values of a request header, by lower-case name: grpc-js metadata, or the headers of an HTTP request
 * (Connect, gRPC-Web), so that both ports admit calls by the same rules.
 */
export type HeaderValues = (name: string) => readonly (string | Buffer)[];

/** The caller of an admitted call: its principal (undefined when authentication is off or the method public) and namespace. */
export type AdmittedCaller = Omit<AdmittedCall, "request">;

/**
 * Admits a gRPC call or says why not: its caller (see `admitCaller`) and its request bytes, decoded as
 * `method`'s input.
 */
export function admitCall(
  method: DescMethod,
  metadata: Metadata,
  requestBytes: Buffer,
  authenticate: Authenticate | undefined,
  methodScope: MethodScope,
): AdmittedCall | { status: Status } {
  const caller = admitCaller((name) => metadata.get(name), authenticate, methodScope);
  if ("status" in caller) return caller;
  const decoded = decodeRequest(method, requestBytes);
  if ("status" in decoded) return decoded;
  return { ...caller, request: decoded.request };
}

/**
 * Admits a caller or says why not: its bearer token (when `authenticate` is given) and its namespace (a
 * public method, or one across namespaces, is in none: `default`).
 */
export function admitCaller(header: HeaderValues, authenticate: Authenticate | undefined, methodScope: MethodScope): AdmittedCaller | { status: Status } {
  const auth = authenticateCall(header, authenticate);
  if ("status" in auth) return auth;
  const scope = methodScope === "namespace" ? namespaceFromCall(header, auth.principal) : { namespace: defaultNamespace };
  if ("status" in scope) return scope;
  return { principal: auth.principal, namespace: scope.namespace };
}

/** The principal of a call, or a refusal. Public services and a server without auth have no principal. */
function authenticateCall(header: HeaderValues, authenticate: Authenticate | undefined): { principal: Principal | undefined } | { status: Status } {
  if (authenticate === undefined) return { principal: undefined };
  const authorization = header("authorization")[0];
  const match = typeof authorization === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  if (match === null) {
    return { status: { code: GrpcStatus.UNAUTHENTICATED, details: missingTokenDetails } };
  }
  const principal = authenticate(match[1]!);
  if (principal === undefined) return { status: { code: GrpcStatus.UNAUTHENTICATED, details: "unknown bearer token" } };
  return { principal };
}

/**
 * The namespace of a call, or a refusal: absent is `default`; a malformed one is INVALID_ARGUMENT; one
 * outside the principal's namespaces is PERMISSION_DENIED (admins may use any).
 */
function namespaceFromCall(header: HeaderValues, principal: Principal | undefined): { namespace: string } | { status: Status } {
  const values = header(namespaceHeader);
  const raw = values[0];
  if (values.length > 1 || (raw !== undefined && typeof raw !== "string")) {
    return { status: { code: GrpcStatus.INVALID_ARGUMENT, details: `${namespaceHeader}: give one namespace` } };
  }
  const namespace = raw === undefined || raw === "" ? defaultNamespace : raw;
  if (!isValidNamespace(namespace)) {
    return {
      status: {
        code: GrpcStatus.INVALID_ARGUMENT,
        details: `${namespaceHeader}: must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit`,
      },
    };
  }
  if (principal !== undefined && !mayUseNamespace(principal, namespace)) {
    return { status: { code: GrpcStatus.PERMISSION_DENIED, details: `namespace "${namespace}" is outside the scope of token "${principal.name}"` } };
  }
  return { namespace };
}

/** The request, or INVALID_ARGUMENT when its bytes are not a valid message of the method's input. */
function decodeRequest(method: DescMethod, bytes: Buffer): { request: unknown } | { status: Status } {
  try {
    return { request: fromBinary(method.input, bytes) };
  } catch {
    return {
      status: {
        code: GrpcStatus.INVALID_ARGUMENT,
        details: `request: not a valid ${method.input.typeName} message (strings must be valid UTF-8)`,
      },
    };
  }
}
