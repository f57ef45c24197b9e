// Echo bot written with telegraf 4.16.3 and its stock webhook filter, as README's snippet has it.
//
// telegraf's default webhookFilter checks the standard X-Telegram-Bot-Api-Secret-Token header;
// the gateway sends the secret under that name too because its config names it in
// webhook_secret_token_headers. No webhookFilter hook here (run_webhook_tests.py,
// "telegraf-stock").
//
// Environment: BOT_TOKEN, BOT_API_BASE, WEBHOOK_PORT, WEBHOOK_SECRET.
'use strict'

const http = require('http')
const { Telegraf } = require('telegraf')
const { message } = require('telegraf/filters')

const { BOT_TOKEN, BOT_API_BASE, WEBHOOK_PORT, WEBHOOK_SECRET } = process.env
const GREETING = 'Hello! I am the telegraf stock webhook bot. Send me any text and I will echo it.'
const PATH = '/telegraf-stock-webhook'

// A trailing slash keeps apiRoot's path (telegraf resolves './bot<token>/<method>' against it).
const bot = new Telegraf(BOT_TOKEN, { telegram: { apiRoot: BOT_API_BASE.replace(/\/?$/, '/') } })
bot.start((ctx) => ctx.reply(GREETING))
bot.on(message('text'), (ctx) => ctx.reply(`echo: ${ctx.message.text}`))

const server = http.createServer(bot.webhookCallback(PATH, { secretToken: WEBHOOK_SECRET }))
server.listen(Number(WEBHOOK_PORT), '127.0.0.1', () =>
  bot.telegram
    .setWebhook(`http://127.0.0.1:${WEBHOOK_PORT}${PATH}`, { secret_token: WEBHOOK_SECRET })
    .then(() => console.error(`telegraf_webhook_stock: listening on 127.0.0.1:${WEBHOOK_PORT}${PATH}`))
    .catch((err) => {
      console.error('telegraf_webhook_stock: setWebhook failed:', err)
      process.exit(1)
    }))
function shutdown () {
  server.close(() => process.exit(0))
  server.closeAllConnections()
}
process.once('SIGINT', shutdown)
process.once('SIGTERM', shutdown)
