import { pino, type Logger } from "pino";

export type { Logger };

/** The log levels a user may configure. */
export const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof logLevels)[number];

/**
 * Creates the one root logger: JSON lines on standard error (standard output is reserved for the
 * `listening on` line). Modules take `logger.child({ component })`.
 */
export function createLogger(level: LogLevel, destination: pino.DestinationStream = pino.destination(2)): Logger {
  return pino({ level, base: { service: "sessionstate" } }, destination);
}
