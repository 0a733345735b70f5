// The linter (npm run lint, run by .ci/run): typescript-eslint's recommended rules, and, with the types,
// the rules that catch what tsc does not: a promise nobody awaits or handles (no-floating-promises,
// no-misused-promises, await-thenable) and a switch that forgets a case of a union (switch-exhaustiveness-check).
import eslint from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: ["gen/", "clients/typescript/src/gen/", "**/dist/", "node_modules/", "clients/python/", "data/", "scratch/", "bench/results/", "bench/tmp/"],
  },
  eslint.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": [
        "error",
        // node:test's describe and test return promises the runner itself awaits.
        { allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["describe", "test", "it", "suite", "before", "after", "beforeEach", "afterEach"] }] },
      ],
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { considerDefaultExhaustiveForUnions: true }],
      // A variable declared before the closures that read it and assigned once after them stays `let`.
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
      // tsc (noUnusedLocals) reports unused names already.
      "@typescript-eslint/no-unused-vars": "off",
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: { globals: { process: "readonly", console: "readonly", URL: "readonly" } },
  },
);
