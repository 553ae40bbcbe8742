/**
 * Errors thrown by {@link SandboxClient}.
 *
 * - {@link SandboxRequestError}: the server answered with a non-2xx status.
 * - {@link SandboxNotEnabledError}: 409 `not_enabled`, the account does not
 *   have sandboxes. Extends SandboxRequestError, so test for it first.
 * - {@link SandboxUnavailableError}: no answer at all (connection refused,
 *   reset, DNS failure, request timeout). Never retried by the client.
 */

/** The server refused the request. `status` is the HTTP status. */
export class SandboxRequestError extends Error {
  /** HTTP status: 402 cap reached, 404 unknown sandbox or unreadable path, 502 bring-up failed, ... */
  readonly status: number;
  /** Machine-readable code from the server's error body (`sandbox_not_found`, `file_not_found`, `cap_reached`, ...). */
  readonly code: string;
  /**
   * On a 408 `timeout` of `stdin`: how many bytes of the data reached the
   * process (the rest was discarded; resume from there). Absent otherwise.
   */
  readonly written?: number;

  constructor(status: number, code: string, message: string, written?: number) {
    super(message);
    this.name = "SandboxRequestError";
    this.status = status;
    this.code = code;
    if (written !== undefined) this.written = written;
  }
}

/** 409 `not_enabled`: the account does not have sandboxes. */
export class SandboxNotEnabledError extends SandboxRequestError {
  constructor(message: string, code = "not_enabled", status = 409) {
    super(status, code, message);
    this.name = "SandboxNotEnabledError";
  }
}

/** The server could not be reached, or did not answer within the request timeout. */
export class SandboxUnavailableError extends Error {
  declare readonly cause: unknown;

  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = "SandboxUnavailableError";
    // Set explicitly as well: some runtimes drop the options bag.
    Object.defineProperty(this, "cause", {
      value: cause,
      enumerable: false,
      writable: true,
      configurable: true,
    });
  }
}
