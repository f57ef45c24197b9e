// A media and inline bot written as telegraf 4.16 bots commonly are: replyWithMediaGroup,
// replyWithAnimation and editMessageCaption, answerInlineQuery with a callback button, a
// cached photo and a results button, a photo into a group that adds it, and setMyCommands with
// a leading slash. No bot.catch: telegraf's default rethrows, so a refused call ends the bot, as
// it does for stock bots. Polling, or telegraf's stock webhookCallback.
//
// The dialog is the one of tests/sdk/python/ptb_gallery.py (run_gallery_tests.py drives it).
//
// Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET.
'use strict'

const http = require('http')
const { Telegraf, Markup, Input } = require('telegraf')
const { message } = require('telegraf/filters')

const ALL_TYPES = [
  'message', 'edited_message', 'channel_post', 'edited_channel_post', 'inline_query', 'chosen_inline_result',
  'callback_query', 'poll', 'poll_answer', 'my_chat_member', 'chat_member', 'chat_join_request', 'message_reaction'
]
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')
const GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64')

const base = process.env.BOT_API_BASE
const bot = new Telegraf(process.env.BOT_TOKEN, { telegram: { apiRoot: base.endsWith('/') ? base : base + '/' } })
// The file_id of the album's first photo, offered again as a cached inline result.
let photo = null

bot.start((ctx) => ctx.reply(`Hi! You came from ${ctx.payload || 'nowhere'}.`))

bot.command('album', async (ctx) => {
  const sent = await ctx.replyWithMediaGroup([
    { type: 'photo', media: Input.fromBuffer(PNG, 'first.png'), caption: 'first' },
    { type: 'photo', media: Input.fromBuffer(Buffer.concat([PNG, Buffer.from([0])]), 'second.png'), caption: 'second' }
  ])
  photo = sent[0].photo[sent[0].photo.length - 1].file_id
  const groups = new Set(sent.map((m) => m.media_group_id))
  const one = groups.size === 1 && !groups.has(undefined)
  await ctx.reply(`Album sent: ${sent.length} messages in ${one ? 'one group' : 'several groups'}`)
})

bot.command('gif', async (ctx) => {
  const sent = await ctx.replyWithAnimation(Input.fromBuffer(GIF, 'hello.gif'), { caption: 'a gif' })
  await ctx.telegram.editMessageCaption(sent.chat.id, sent.message_id, undefined, 'a gif, edited')
  // A button added to the animation afterwards, and the user's command tidied away.
  await ctx.telegram.editMessageReplyMarkup(sent.chat.id, sent.message_id, undefined,
    Markup.inlineKeyboard([Markup.button.callback('Another', 'gif:again')]).reply_markup)
  await ctx.deleteMessage()
})

// A photo by URL, as stock bots send them: the gateway fetches it (media_from_urls).
bot.command('url', (ctx) => ctx.replyWithPhoto(ctx.payload, { caption: 'by URL' }))

bot.on('inline_query', async (ctx) => {
  const results = [{
    type: 'article',
    id: 'art',
    title: 'Press me',
    input_message_content: { message_text: 'Inline with a button' },
    ...Markup.inlineKeyboard([Markup.button.callback('Press', 'inline-press')])
  }]
  if (photo) results.push({ type: 'photo', id: 'pic', photo_file_id: photo, caption: 'cached photo' })
  await ctx.answerInlineQuery(results, { cache_time: 0, button: { text: 'Open the bot', start_parameter: 'from-inline' } })
})

bot.action('inline-press', (ctx) => ctx.answerCbQuery('Pressed!'))

bot.on(message('photo'), async (ctx, next) => {
  if (!ctx.message.via_bot) return next()
  await ctx.reply('Got a photo via me')
})

bot.on('my_chat_member', async (ctx) => {
  const change = ctx.myChatMember
  if (['group', 'supergroup'].includes(change.chat.type) && change.new_chat_member.status === 'member') {
    await ctx.telegram.sendPhoto(change.chat.id, Input.fromBuffer(PNG, 'hello.png'), { caption: 'Hello group' })
  }
})

async function setCommands () {
  await bot.telegram.setMyCommands([{ command: '/album', description: 'Send an album' }, { command: '/gif', description: 'Send an animation' }])
}

if (!process.env.WEBHOOK_PORT) {
  setCommands().then(() => bot.launch({ allowedUpdates: ALL_TYPES }))
  process.once('SIGINT', () => bot.stop('SIGINT'))
  process.once('SIGTERM', () => bot.stop('SIGTERM'))
} else {
  const port = Number(process.env.WEBHOOK_PORT)
  const path = '/telegraf-gallery'
  const secret = process.env.WEBHOOK_SECRET
  const server = http.createServer(bot.webhookCallback(path, { secretToken: secret }))
  server.listen(port, '127.0.0.1', async () => {
    await setCommands()
    await bot.telegram.setWebhook(`http://127.0.0.1:${port}${path}`, { secret_token: secret, allowed_updates: ALL_TYPES })
  })
  const stop = () => server.close(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}
