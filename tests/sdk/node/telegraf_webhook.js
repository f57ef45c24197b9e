// Echo bot written with telegraf 4.16.3 in webhook mode against a bot-gateway.
//
// Environment:
//   BOT_TOKEN       the bot token
//   BOT_API_BASE    the gateway's Bot API listener, e.g. http://127.0.0.1:8081
//   WEBHOOK_PORT    port to listen on (127.0.0.1); the webhook URL is plain http (loopback)
//   WEBHOOK_SECRET  the secret_token
//
// telegraf checks the hard-wired x-telegram-bot-api-secret-token header; bot.webhookFilter is a
// public, assignable hook (bound to {hookPath, path, secretToken}) that reads the gateway's
// header instead (SDK-COMPAT §7). launch({webhook}) always registers an https:// URL, so the bot
// runs its own http server and calls setWebhook with the loopback http URL itself.
// sendChatAction is answered in the webhook reply (telegraf's default webhookReply), the echo
// goes through the HTTP API.
'use strict'

const crypto = require('crypto')
const http = require('http')
const { Telegraf } = require('telegraf')
const { message } = require('telegraf/filters')

const GREETING = 'Hello! I am the telegraf webhook bot. Send me any text and I will echo it.'
const PATH = '/telegraf-webhook'

const token = process.env.BOT_TOKEN
const base = process.env.BOT_API_BASE
const port = Number(process.env.WEBHOOK_PORT)
const secret = process.env.WEBHOOK_SECRET
if (!token || !base || !port || !secret) {
  console.error('telegraf_webhook: set BOT_TOKEN, BOT_API_BASE, WEBHOOK_PORT and WEBHOOK_SECRET')
  process.exit(2)
}

function sameSecret (got, want) {
  if (typeof got !== 'string') return false
  const a = Buffer.from(got)
  const b = Buffer.from(want)
  return a.length === b.length && crypto.timingSafeEqual(a, b)
}

const apiRoot = base.endsWith('/') ? base : base + '/'
const bot = new Telegraf(token, { telegram: { apiRoot } })
// A regular function, not an arrow: telegraf binds it to {hookPath, path, secretToken}.
bot.webhookFilter = function (req) {
  if (req.method !== 'POST' || req.url !== this.path) return false
  return !this.secretToken || sameSecret(req.headers['x-compat-bot-api-secret-token'], this.secretToken)
}

bot.start((ctx) => ctx.reply(GREETING))
bot.on(message('text'), async (ctx) => {
  await ctx.sendChatAction('typing')
  await ctx.reply(`echo: ${ctx.message.text}`)
})
bot.catch((err, ctx) => {
  console.error(`telegraf_webhook: handler error for update ${ctx.update.update_id}:`, err)
})

const server = http.createServer(bot.webhookCallback(PATH, { secretToken: secret }))
server.listen(port, '127.0.0.1', () => {
  bot.telegram
    .setWebhook(`http://127.0.0.1:${port}${PATH}`, { secret_token: secret })
    .then(() => console.error(`telegraf_webhook: listening on 127.0.0.1:${port}${PATH}`))
    .catch((err) => {
      console.error('telegraf_webhook: setWebhook failed:', err)
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
