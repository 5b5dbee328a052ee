// pm2 example for an af validator (see README, "Operating a validator"; `cargo install --locked
// --path . --root /usr/local` puts af at the path below):
//   pm2 start deploy/ecosystem.config.js && pm2 logs af-validator
// pm2 stops with SIGINT, then SIGKILL after kill_timeout: af seals what it recorded on
// SIGINT or SIGTERM and exits 130, so give it time.
module.exports = {
  apps: [
    {
      name: "af-validator",
      script: "/usr/local/bin/af",
      args: [
        "validate",
        "--data", "/var/lib/af/validator",
        "--config", "/etc/af/validator.toml",
        "--serve",
        "--listen", "/ip4/0.0.0.0/tcp/7070",
        "--http", "127.0.0.1:7080",
      ],
      interpreter: "none",
      autorestart: true,
      kill_timeout: 90000,
      env: { RUST_LOG: "warn,af=info" },
    },
  ],
};
