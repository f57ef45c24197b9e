// A file bot written with telegraf 4.16.3: /voice uploads voice.ogg (from the bot's working
// directory, where the runner writes it) as a voice from a Buffer; for a received document it
// fetches getFileLink's URL itself (node's fetch), replies with the size and SHA-256 of what
// it got, and sends the document back by file_id (no re-upload). Polling, or webhook mode
// when WEBHOOK_PORT is set (uploads never travel as webhook replies in telegraf).
//
// Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET
// (see compat.js).
'use strict'

const crypto = require('crypto')
const fs = require('fs')
const { message } = require('telegraf/filters')
const { makeBot, run } = require('./compat')

const NAME = 'telegraf_files'

const bot = makeBot(NAME)

bot.command('voice', (ctx) =>
  ctx.replyWithVoice({ source: fs.readFileSync('voice.ogg'), filename: 'voice.ogg' }, { caption: 'telegraf voice' })
)

bot.on(message('document'), async (ctx) => {
  const doc = ctx.message.document
  const link = await ctx.telegram.getFileLink(doc.file_id)
  const resp = await fetch(link)
  if (!resp.ok) throw new Error(`GET of the file link answered ${resp.status}: ${await resp.text()}`)
  const data = Buffer.from(await resp.arrayBuffer())
  const sha = crypto.createHash('sha256').update(data).digest('hex')
  await ctx.reply(`telegraf got ${data.length} bytes, sha256 ${sha}`)
  await ctx.replyWithDocument(doc.file_id, { caption: 'telegraf: your file back' })
})

run(bot, NAME, '/telegraf-files', ['message'])
