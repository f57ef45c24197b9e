// Echo bot written with telegraf 4.16.3 in webhook mode against a bot-gateway.
//
// Environment: BOT_TOKEN, BOT_API_BASE, WEBHOOK_PORT, WEBHOOK_SECRET (see compat.js, which
// serves the webhook and checks the gateway's X-Compat-Bot-Api-Secret-Token header).
// sendChatAction is answered in the webhook reply (telegraf's default webhookReply), the echo
// goes through the HTTP API.
'use strict'

const { message } = require('telegraf/filters')
const { makeBot, run } = require('./compat')

const NAME = 'telegraf_webhook'
const GREETING = 'Hello! I am the telegraf webhook bot. Send me any text and I will echo it.'

const bot = makeBot(NAME)
bot.start((ctx) => ctx.reply(GREETING))
bot.on(message('text'), async (ctx) => {
  await ctx.sendChatAction('typing')
  await ctx.reply(`echo: ${ctx.message.text}`)
})

run(bot, NAME, '/telegraf-webhook')
