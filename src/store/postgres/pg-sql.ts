import type { SessionId } from "../../domain/session-key.js";

/**
 * SQL statements for node-postgres, written as tagged templates: `sql\`SELECT … WHERE id = ${id}\``. Every
 * interpolated value becomes a parameter ($1, $2, …), never text; an interpolated `SqlQuery` (a fragment,
 * `sql\`\`` for nothing) is spliced in with its own parameters renumbered; `rawSql` is text taken as it is,
 * for identifiers and column lists this program writes itself, never for input.
 */

/** A statement or a fragment of one: text around parameter values. */
export class SqlQuery {
  /** @internal Built by `sql` and `rawSql` only. */
  constructor(
    private readonly strings: readonly string[],
    private readonly values: readonly unknown[],
  ) {}

  /** The text with `$n` placeholders, and the values in their order, as node-postgres takes them. */
  compile(): { text: string; values: unknown[] } {
    const values: unknown[] = [];
    const text = this.appendTo(values);
    return { text, values };
  }

  private appendTo(values: unknown[]): string {
    let text = this.strings[0]!;
    for (let i = 0; i < this.values.length; i++) {
      const value = this.values[i];
      if (value instanceof SqlQuery) text += value.appendTo(values);
      else {
        values.push(value);
        text += `$${values.length}`;
      }
      text += this.strings[i + 1]!;
    }
    return text;
  }
}

/** A statement with parameters; see the module comment. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): SqlQuery {
  return new SqlQuery(strings, values);
}

/** Text spliced in as it is: only for SQL this program writes itself (column lists, schema names). */
export function rawSql(text: string): SqlQuery {
  return new SqlQuery([text], []);
}

/**
 * `namespace = … AND agent_id = … AND session_key = …` for a session, on a table whose session columns bear
 * those names (heads, upstream_links, run_flags, own_texts), optionally qualified by `alias`.
 */
export function sessionIs(session: SessionId, alias?: string): SqlQuery {
  const column = (name: string): SqlQuery => rawSql(alias === undefined ? name : `${alias}.${name}`);
  return sql`${column("namespace")} = ${session.namespace} AND ${column("agent_id")} = ${session.agentId} AND ${column("session_key")} = ${session.key}`;
}

/** Whatever runs statements: the database (one statement, one snapshot) or a transaction. */
export interface Queryable {
  query<T extends object = Record<string, unknown>>(query: SqlQuery): Promise<T[]>;
}
