import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.test.ts', 'lib/**/*.test.ts', 'infra/**/*.test.ts', 'functions/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    // Tests share the real clusters; two workers keep a 2-core machine responsive.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
