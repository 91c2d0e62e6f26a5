// Bundles src/index.ts and its packages into one module for j2w (componentize-js), leaving the
// component's imports (the WIT interfaces its packages declare) to the host.
import { build } from "esbuild";
import { SpinEsbuildPlugin } from "@spinframework/build-tools/plugins/esbuild/index.js";

await build({
  entryPoints: ["src/index.ts"],
  bundle: true,
  format: "esm",
  platform: "neutral",
  mainFields: ["module", "main"],
  target: "es2022",
  outfile: "build/bundle.js",
  plugins: [await SpinEsbuildPlugin()],
  logLevel: "warning",
});
