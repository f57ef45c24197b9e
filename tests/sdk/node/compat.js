// What the telegraf bots of tests/sdk share: the Telegraf pointed at the gateway, and the two
// ways of receiving updates (long polling, or a webhook that checks the gateway's secret
// header). A bot runs in webhook mode when WEBHOOK_PORT is set, else it long-polls.
//
// Environment:
//   BOT_TOKEN       the bot token
//   BOT_API_BASE    the gateway's Bot API listener, e.g. http://127.0.0.1:8081
//   WEBHOOK_PORT    (webhook mode) port to listen on (127.0.0.1); the URL is plain http (loopback)
//   WEBHOOK_SECRET  (webhook mode) the secret_token
'use strict'

const crypto = require('crypto')
const http = require('http')
const { Telegraf } = require('telegraf')

function sameSecret (got, want) {
  if (typeof got !== 'string') return false
  const a = Buffer.from(got)
  const b = Buffer.from(want)
  return a.length === b.length && crypto.timingSafeEqual(a, b)
}

// A Telegraf for the gateway; `name` prefixes log lines.
function makeBot (name) {
  const token = process.env.BOT_TOKEN
  const base = process.env.BOT_API_BASE
  if (!token || !base) {
    console.error(`${name}: set BOT_TOKEN and BOT_API_BASE`)
    process.exit(2)
  }
  // telegraf resolves './bot<token>/<method>' against apiRoot as a URL, which drops the last
  // path segment unless apiRoot ends with '/' (SDK-COMPAT §1); a trailing slash keeps a prefix.
  const apiRoot = base.endsWith('/') ? base : base + '/'
  const bot = new Telegraf(token, { telegram: { apiRoot } })
  // Without a catch, an error in a handler ends polling; log it and keep serving.
  bot.catch((err, ctx) => {
    console.error(`${name}: handler error for update ${ctx.update.update_id}:`, err)
  })
  return bot
}

// Long-polls, or (WEBHOOK_PORT set) serves the webhook at `path`. allowedUpdates is passed on
// either way (message_reaction, for one, is only delivered when asked for).
//
// Webhook mode: telegraf checks the hard-wired x-telegram-bot-api-secret-token header;
// bot.webhookFilter is a public, assignable hook (bound to {hookPath, path, secretToken}) that
// reads the gateway's header instead (SDK-COMPAT §7). launch({webhook}) always registers an
// https:// URL, so the bot runs its own http server and calls setWebhook with the loopback http
// URL itself. Calls telegraf allows as webhook replies (sendChatAction, answerCallbackQuery...)
// travel back in the webhook answer (telegraf's default webhookReply).
function run (bot, name, path, allowedUpdates) {
  const port = Number(process.env.WEBHOOK_PORT)
  if (!process.env.WEBHOOK_PORT) {
    bot.launch({ allowedUpdates }).catch((err) => {
      console.error(`${name}: polling stopped:`, err)
      process.exit(1)
    })
    // launch() resolves only when polling ends (SDK-COMPAT §4), so this logs before the first poll.
    console.error(`${name}: starting: getMe, deleteWebhook, then long polling`)
    process.once('SIGINT', () => bot.stop('SIGINT'))
    process.once('SIGTERM', () => bot.stop('SIGTERM'))
    return
  }
  const secret = process.env.WEBHOOK_SECRET
  if (!port || !secret) {
    console.error(`${name}: webhook mode needs WEBHOOK_PORT and WEBHOOK_SECRET`)
    process.exit(2)
  }
  // A regular function, not an arrow: telegraf binds it to {hookPath, path, secretToken}.
  bot.webhookFilter = function (req) {
    if (req.method !== 'POST' || req.url !== this.path) return false
    return !this.secretToken || sameSecret(req.headers['x-compat-bot-api-secret-token'], this.secretToken)
  }
  const server = http.createServer(bot.webhookCallback(path, { secretToken: secret }))
  server.listen(port, '127.0.0.1', () => {
    const extra = { secret_token: secret }
    if (allowedUpdates) extra.allowed_updates = allowedUpdates
    bot.telegram
      .setWebhook(`http://127.0.0.1:${port}${path}`, extra)
      .then(() => console.error(`${name}: listening on 127.0.0.1:${port}${path}`))
      .catch((err) => {
        console.error(`${name}: setWebhook failed:`, err)
        process.exit(1)
      })
  })
  function shutdown () {
    server.close(() => process.exit(0))
    // The gateway keeps its connection alive between deliveries; close it too.
    server.closeAllConnections()
  }
  process.once('SIGINT', shutdown)
  process.once('SIGTERM', shutdown)
}

module.exports = { makeBot, run }
