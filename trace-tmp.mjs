import module from 'node:module';
const seen = new Set();
module.registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); seen.add(r.url); return r; } });
const name = process.argv[2];
await import('/work/main/lib/telemetry-sdk.ts');
await import(`/work/main/functions/${name}/index.ts`);
await import('/work/main/node_modules/faas-js-runtime/index.js');
await import('/work/main/functions/deps.ts');
await import('/work/main/functions/senders.ts');
const pkgs = {};
for (const u of seen) { const m = u.match(/node_modules\/((@[^/]+\/)?[^/]+)/); const k = m ? m[1] : (u.startsWith('file:') ? 'project' : 'builtin'); pkgs[k] = (pkgs[k]||0)+1; }
console.log(name, seen.size, JSON.stringify(Object.entries(pkgs).sort((a,b)=>b[1]-a[1]).slice(0,25)));
