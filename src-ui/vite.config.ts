// Vite root is src-ui (run as `vite build src-ui`); the build goes to
// src-ui/dist, which desktop/tauri.conf.json embeds. A relative base lets the
// pages load from Tauri's custom protocol.
import { defineConfig } from "vitest/config";

export default defineConfig({
  base: "./",
  clearScreen: false,
  server: { port: 1420, strictPort: true },
  build: { outDir: "dist", emptyOutDir: true, target: "es2021" },
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.ts"],
  },
});
