// ESLint runs one job here: the type-aware checks against unawaited promises.
// An unawaited settle() is the worst bug an idempotency library can ship; Biome does formatting and the rest.
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: [
      "dist/**",
      "node_modules/**",
      "coverage/**",
      "bench/results/**",
      "bench/tmp/**",
      "reports/**",
      ".stryker-tmp/**",
    ],
  },
  {
    files: ["**/*.ts"],
    languageOptions: {
      parser: tseslint.parser,
      // The two programs every file belongs to, each built once for the whole run.
      parserOptions: {
        project: ["./tsconfig.json", "./tsconfig.workers.json"],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { "@typescript-eslint": tseslint.plugin },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
    },
  },
);
