/**
 * The agent CLIs whose prompt hooks the service takes (SPEC §8.2), and the hook event each calls when a
 * person (or a gateway) submits a prompt. Every other event a hook may send is answered and ignored.
 */
export const hookClis = ["claude", "codex", "gemini"] as const;
export type HookCli = (typeof hookClis)[number];

/** The event of each CLI that means "a prompt was submitted". */
export const promptEvents: Readonly<Record<HookCli, string>> = { claude: "UserPromptSubmit", codex: "UserPromptSubmit", gemini: "BeforeAgent" };

export function isHookCli(name: string): name is HookCli {
  return (hookClis as readonly string[]).includes(name);
}
